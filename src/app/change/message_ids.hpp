#pragma once

#include <string_view>

/// The MESSAGE_ID of each kind of journal entry iommud writes. catalog/iommud.catalog explains each
/// one (`journalctl -x`); tests/catalog checks that both hold the same set. Never change an ID:
/// users filter on them (`journalctl MESSAGE_ID=...`). The fields that go with them:
/// IOMMUD_DEVICE (PCI address), IOMMUD_NAME (nvme0, enp5s0), IOMMUD_GROUP, IOMMUD_RULE,
/// IOMMUD_POLICY (file:line), IOMMUD_KIND, IOMMUD_OBJECT, IOMMUD_KEY, IOMMUD_FROM, IOMMUD_TO,
/// IOMMUD_RISK, IOMMUD_IDENTITY, IOMMUD_SKIP (why a change was not made), IOMMUD_PROBLEMS (how
/// many errors a rejected reload found), IOMMUD_HANDLED (on a debug entry without MESSAGE_ID: the
/// PCI function whose debounced events a finished worker handled). The catalog substitutes only fields an entry of its
/// kind always carries: kWeakened, kChanged, kAdvised, kRefused, kFailed and kReverted the KIND and OBJECT (kWeakened
/// also FROM, TO and RISK), kRecovered the GROUP, kReplugged DEVICE, NAME and IDENTITY, kMeasured
/// DEVICE and NAME.
namespace iommud::app::msgid {

/// Coldplug is done and the daemon is ready (summary counts in the message).
inline constexpr std::string_view kStarted = "16f439e513b4481aa99d04094596ffda";
/// A change that weakens DMA isolation was made (warning), e.g. a group set to identity.
inline constexpr std::string_view kWeakened = "ec3ed2b1eb094e9da215ec6cd8347600";
/// Any other change was made: rings, coalescing, parameters, DMA-FQ to DMA.
inline constexpr std::string_view kChanged = "d463f6ed8f5a47d486ad4b0dbd88c24e";
/// A rule in advise mode (or an advise-only configuration) would change something; nothing changed.
inline constexpr std::string_view kAdvised = "b03a51f8e908478b9c0d9322a29e2c45";
/// A wanted change was not made: a safety rule or the device's use forbids it.
inline constexpr std::string_view kRefused = "8e66d046aee24c5bb575afe346446f31";
/// A change failed and was rolled back.
inline constexpr std::string_view kFailed = "16d1a84d21544e9fac413193e131fe9d";
/// At start, a transaction a killed process left half-done was finished or rolled back.
inline constexpr std::string_view kRecovered = "7bbdac1154a4447f8f3726189cf35385";
/// Policies were (re)loaded.
inline constexpr std::string_view kPoliciesLoaded = "40dd2a3790f1493684b1a4d3b4e3b6ec";
/// A reload found a broken policy or configuration; the last good set stays in force.
inline constexpr std::string_view kPoliciesRejected = "94f8437cb3474d33b97e1e3d733b8c90";
/// A device iommud knew came back (Thunderbolt re-plug); its policy is applied again because the
/// kernel gave its new group the default type.
inline constexpr std::string_view kReplugged = "37e097fceacb4da7bba7f9f1abd8307c";
/// A change was reverted (revert-on-stop), or found drifted and left alone.
inline constexpr std::string_view kReverted = "f9a878de3cec4d2c8e5528b4c780a18f";
/// The measured effect of a change on one device ([measure] effect-window): a window before the
/// change and one after it. Always carries DEVICE and NAME.
inline constexpr std::string_view kMeasured = "b282470e86824954844d0a37c8464bd2";
/// The udev monitor's socket overflowed and hotplug events were lost (docs/kernel.md §12); the
/// daemon rescans the host. IOMMUD_OVERFLOWS: how many times since start.
inline constexpr std::string_view kEventsLost = "219f67a45a864ab8922530d9cf11bbae";
/// The daemon stops.
inline constexpr std::string_view kStopping = "fee5a7bd6af842c1b7ac52d4805a577b";

}  // namespace iommud::app::msgid
