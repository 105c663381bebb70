#include "core/policy_lint.hpp"

#include <gtest/gtest.h>

#include "adapters/sysfs/root.hpp"
#include "app/change/policy_check.hpp"
#include "config/policy_loader.hpp"
#include "support/fake_host.hpp"

namespace policy_lint_test {

using namespace iommud;

std::vector<core::Rule> rules(const std::string& text) {
  auto parsed = config::parsePolicyText(text, "p.toml");
  EXPECT_TRUE(parsed.diagnostics.empty()) << parsed.diagnostics.front().str();
  return parsed.rules;
}

std::vector<std::string> lint(const std::string& text, const std::map<std::string, core::Module>& modules = {}) {
  std::vector<std::string> out;
  for (const auto& w : core::lintRules(rules(text), modules)) out.push_back(w.where.str() + ": " + w.message);
  return out;
}

const std::string kHead = "[[rule]]\nname = \"r\"\ndescription = \"test\"\n";

TEST(PolicyLint, AWeakeningDomainWithoutAcceptNeverActs) {
  EXPECT_EQ(lint(kHead + "domain = \"identity\"\n"),
            (std::vector<std::string>{"p.toml:4:10: rule 'r' asks for identity but does not accept the trade-off, so "
                                      "it never acts (plan: needs-acceptance). Add accept = [\"no-isolation\"] to the "
                                      "rule (or an [[override]]) to accept it"}));
  EXPECT_EQ(lint(kHead + "domain = \"DMA-FQ\"\n").size(), 1U);
  // Accepted, advice only (never refused for its trade-off), strict or the boot default: nothing to say.
  EXPECT_TRUE(lint(kHead + "accept = [\"no-isolation\"]\ndomain = \"identity\"\n").empty());
  EXPECT_TRUE(lint(kHead + "mode = \"advise\"\ndomain = \"identity\"\n").empty());
  EXPECT_TRUE(lint(kHead + "domain = \"DMA\"\n").empty());
  EXPECT_TRUE(lint(kHead + "domain = \"auto\"\n").empty());
}

TEST(PolicyLint, NicSettingsOnARuleThatMatchesNoNicNeverAct) {
  EXPECT_EQ(lint(kHead + "[rule.match]\nkind = \"nvme\"\n[rule.rings]\nrx = 4096\n[rule.coalesce]\nrx-usecs = 8\n"),
            (std::vector<std::string>{"p.toml:1:1: rule 'r' sets [rule.rings], [rule.coalesce] but matches only kind "
                                      "nvme, which has no network interface, so they never act (plan: no-netdev)"}));
  EXPECT_TRUE(lint(kHead + "[rule.match]\nkind = [\"nvme\", \"nic\"]\n[rule.rings]\nrx = 4096\n").empty());
  EXPECT_TRUE(lint(kHead + "[rule.rings]\nrx = 4096\n").empty());  // any kind
  EXPECT_TRUE(lint(kHead + "domain = \"DMA\"\n[rule.match]\nkind = \"nvme\"\n").empty());
}

TEST(PolicyLint, AParameterTheLoadedModuleLacksNeverActs) {
  core::Module nvme;
  nvme.loaded = true;
  nvme.params["poll_queues"] = {};
  nvme.params["io_queue_depth"] = {};
  const std::string param = kHead + "[[rule.param]]\nmodule = \"nvme\"\nname = \"poll_queue\"\nvalue = \"4\"\n";
  EXPECT_EQ(lint(param, {{"nvme", nvme}}),
            (std::vector<std::string>{
                "p.toml:4:1: module nvme has no parameter 'poll_queue' (read in /sys/module/nvme/parameters, which "
                "lists all but those without permissions); did you mean 'poll_queues'?"}));
  // Not loaded, or listing no parameter at all: nothing is known.
  EXPECT_TRUE(lint(param).empty());
  nvme.params.clear();
  EXPECT_TRUE(lint(param, {{"nvme", nvme}}).empty());
}

// The app reads /sys/module of the root for the modules the rules name, and the warnings join the
// diagnostics `iommuctl check` prints.
TEST(PolicyLint, CheckReadsTheModulesOfTheRoot) {
  iommud::testing::FakeHost h;
  h.write("/sys/module/nvme/parameters/poll_queues", "0\n");
  auto loaded = config::combine(
      {}, {config::parsePolicyText(kHead + "[[rule.param]]\nmodule = \"nvme\"\nname = \"pol_queues\"\nvalue = \"4\"\n",
                                   "p.toml")});
  ASSERT_TRUE(loaded.ok());
  app::lintPolicies(adapters::sysfs::Root(h.rootString()), loaded);
  ASSERT_EQ(loaded.diagnostics.size(), 1U);
  EXPECT_EQ(loaded.diagnostics[0].severity, config::Diagnostic::Severity::Warning);
  EXPECT_NE(loaded.diagnostics[0].str().find("did you mean 'poll_queues'?"), std::string::npos)
      << loaded.diagnostics[0].str();
}

}  // namespace policy_lint_test
