// The IOMMU page (cockpit/README.md): iommud's view of the host.
//
// The daemon (org.iommud1 on the system bus) says whether it runs, what it is doing, and when the
// host changed (PropertiesChanged). Its properties carry no exposure, protection level, remedies
// or in-use reasons, so the page reads the host in one piece from `iommuctl status --json`
// (docs/schema/status.schema.json) each time the daemon says something changed, and one device in
// full from `iommuctl status DEVICE --json` when its row is opened. Never sysfs directly.

/* global cockpit */

const NAME = "org.iommud1";
const PATH = "/org/iommud1";
const IFACE = "org.iommud1.Manager";
const COLUMNS = 8;

const $ = id => document.getElementById(id);

// Every state the page can be in, and the sections each shows.
const SECTIONS = {
    loading: ["loading"],
    loaded: ["verdict", "devices", "plan", "history"],
    "no-iommu": ["verdict", "no-iommu"],
    "not-running": ["not-running"],
    failed: ["failed"],
};

function show(state, message) {
    const visible = new Set(SECTIONS[state]);
    for (const id of new Set(Object.values(SECTIONS).flat()))
        $(id).hidden = !visible.has(id);
    if (state === "failed")
        $("failed-message").textContent = message;
    document.body.dataset.state = state;
}

// el("td", {class: "x"}, "text", child...): an element with attributes and children.
function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs))
        e.setAttribute(k, v);
    for (const c of children)
        if (c !== null && c !== undefined)
            e.append(c);
    return e;
}

const NONE = "—";

function iommuctl(...args) {
    // superuser "try": as root the page sees what root sees (config space, debugfs); otherwise
    // iommuctl says what it could not read.
    return cockpit.spawn(["iommuctl", ...args, "--json"], { superuser: "try", err: "message" })
            .then(out => JSON.parse(out));
}

// --- the verdict -------------------------------------------------------------------------------

function deviceName(d) {
    return [...d.netdevs.map(n => n.name), ...d.nvme.map(n => n.name)].join(", ");
}

function renderVerdict(status) {
    const score = status.score;
    const unmet = score.criteria.filter(c => c.level === score.level + 1 && c.met !== true);
    $("level").replaceChildren(
        el("span", { class: `level level-${score.level}` }, `${score.level} of 3`),
        unmet.length
            ? el("span", { class: "level-next" }, ` — for ${score.level + 1}: ${unmet.map(c => c.text).join("; ")}`)
            : null);

    const iommu = status.iommu;
    $("mode").textContent = iommu.present
        ? `${iommu.mode} (${iommu.vendor}${iommu.strict === false ? ", lazy invalidation" : ""})`
        : "no IOMMU";

    const names = new Map(status.devices.map(d => [d.address, deviceName(d)]));
    const all = status.exposure.all_memory;
    $("all-memory").textContent = all.length
        ? `${all.length}: ${all.map(a => names.get(a) ? `${a} (${names.get(a)})` : a).join(", ")}`
        : "none";

    const list = $("findings");
    list.replaceChildren(...status.findings.map(renderFinding));
    $("no-findings").hidden = status.findings.length > 0;
}

function renderFinding(f) {
    const remedies = f.remedies.length
        ? el("ul", { class: "remedies", "aria-label": `Remedies for ${f.title}` },
             ...f.remedies.map(r => el("li", {}, r.action, r.security_cost
                 ? el("span", { class: "cost" }, ` Costs: ${r.security_cost}`)
                 : null)))
        : null;
    return el("li", { class: `finding severity-${f.severity}`, "data-id": f.id },
              el("span", { class: "severity" }, f.severity),
              " ", el("strong", {}, f.title),
              el("p", {}, f.summary),
              remedies);
}

// --- the table ---------------------------------------------------------------------------------

function untrustedText(d) {
    const why = d.thunderbolt ? "Thunderbolt" : d.removable;
    return `${d.untrusted ? "yes" : "no"}${why ? ` (${why})` : ""}`;
}

function inUseText(d) {
    return d.in_use ? `yes: ${[...new Set(d.in_use_reasons.map(r => r.kind))].join(", ")}` : "no";
}

function detailId(address) {
    return `detail-${address.replace(/[:.]/g, "-")}`;
}

function renderTable(status) {
    const types = new Map(status.groups.map(g => [g.id, g.type]));
    const levels = new Map(status.exposure.devices.map(e => [e.address, e.level]));
    // By group, ungrouped devices last: the members of a group side by side.
    const devices = [...status.devices].sort((a, b) =>
        (a.group ?? Infinity) - (b.group ?? Infinity) || a.address.localeCompare(b.address));
    // What the user had open and where the keyboard was stay so across a read.
    const open = new Set([...document.querySelectorAll("#device-rows button[aria-expanded=true]")]
            .map(b => b.closest("tr").dataset.address));
    const focused = document.activeElement?.closest("#device-rows tr")?.dataset.address;
    const method = document.activeElement?.dataset.method;  // Apply or Revert: stays on it
    const rows = [];
    for (const d of devices) {
        const name = deviceName(d);
        const button = el("button", { type: "button", class: "disclosure", "aria-expanded": "false",
                                      "aria-controls": detailId(d.address) },
                          el("span", { class: "address" }, d.address),
                          name ? el("span", { class: "name" }, ` ${name}`) : null);
        const level = levels.get(d.address) ?? NONE;
        const row = el("tr", { "data-address": d.address },
                       el("th", { scope: "row" }, button),
                       el("td", { "data-field": "group" }, d.group === null ? NONE : String(d.group)),
                       el("td", { "data-field": "type" }, d.group === null ? NONE : types.get(d.group) ?? NONE),
                       el("td", { "data-field": "exposure" },
                          el("span", { class: `exposure exposure-${level}` }, level)),
                       el("td", { "data-field": "untrusted" }, untrustedText(d)),
                       el("td", { "data-field": "driver" }, d.driver ?? NONE),
                       el("td", { "data-field": "in-use" }, inUseText(d)),
                       el("td", { "data-field": "actions" },
                          actionButton("Apply", d.address, "Apply the policies to"),
                          " ",
                          actionButton("Revert", d.address, "Revert iommud's changes on"),
                          measuredLine(d.address)));
        const detail = el("tr", { class: "detail", id: detailId(d.address), hidden: "" },
                          el("td", { colspan: String(COLUMNS) }));
        button.addEventListener("click", () => toggle(button, detail, d.address));
        rows.push(row, detail);
        if (open.has(d.address))
            toggle(button, detail, d.address);
    }
    $("device-rows").replaceChildren(...rows);
    if (focused)
        document.querySelector(`#device-rows tr[data-address="${focused}"] ` +
                               (method ? `button[data-method=${method}]` : "button"))?.focus();
}

function toggle(button, detail, address) {
    const expand = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(expand));
    detail.hidden = !expand;
    if (!expand)
        return;
    const cell = detail.firstChild;
    cell.dataset.state = "loading";
    cell.replaceChildren(el("p", {}, `Reading ${address}…`));
    iommuctl("status", address)
            .then(report => {
                cell.replaceChildren(renderDevice(report));
                cell.dataset.state = "loaded";
            })
            .catch(ex => {
                cell.replaceChildren(el("p", { class: "error" }, `iommuctl status ${address}: ${cockpit.message(ex)}`));
                cell.dataset.state = "failed";
            });
}

// --- a change's measured effect: the daemon's Measured signal ----------------------------------

// With [measure] effect-window (docs/measure.md) the daemon sends, a window after each change, the
// DMA of the devices it concerned before and after it. The latest per device, shown in its row
// until the page is left: a signal is not kept anywhere else (the journal's entry is the history).
const measured = new Map();

// One decimal: a device doing a few maps a second does not read as 0.
const rate = v => v.toFixed(1);

function effectText(m) {
    const maps = m.attributed ? `${rate(m.mapsBefore)} → ${rate(m.mapsAfter)} maps/s, ` : "";
    return `Measured: ${maps}${rate(m.bouncesBefore)} → ${rate(m.bouncesAfter)} bounces/s, ` +
           `translated ${m.translatedBefore} → ${m.translatedAfter}`;
}

function measuredLine(address) {
    const m = measured.get(address);
    return m ? el("p", { class: "measured", "data-field": "measured" }, effectText(m)) : null;
}

function onMeasured(effects) {
    // (address, name, seconds before, after, maps/s before, after, bounces/s before, after,
    // translated before, after, maps attributed): dbus/org.iommud1.Manager.xml
    for (const [address, , , , mapsBefore, mapsAfter, bouncesBefore, bouncesAfter, translatedBefore, translatedAfter,
        attributed] of effects) {
        measured.set(address, { mapsBefore, mapsAfter, bouncesBefore, bouncesAfter, translatedBefore, translatedAfter,
                                attributed });
    }
    refresh();  // the row shows it, and the history gets the daemon's entry of it
}

// --- one device: iommuctl status DEVICE --json (docs/schema/device.schema.json) ----------------

function fact(term, ...value) {
    return el("div", {}, el("dt", {}, term), el("dd", {}, ...value));
}

function list(items, render, empty = "none") {
    return items.length ? el("ul", {}, ...items.map(i => el("li", {}, render(i)))) : empty;
}

function renderDevice(report) {
    const d = report.device;
    const ids = `${d.vendor_id}:${d.device_id} (subsystem ${d.subsystem_vendor_id}:${d.subsystem_device_id}), ` +
                `class ${d.class}, ${d.kind}`;
    const facts = [
        fact("Device", ids),
        fact("Exposure", report.exposure
            ? el("div", {}, el("span", { class: `exposure exposure-${report.exposure.level}` }, report.exposure.level),
                 list(report.exposure.reasons, r => `${r.source}: ${r.text}`, null))
            : "not judged"),
        fact("Group", report.group
            ? `${report.group.id}, ${report.group.type ?? "type unreadable"}: ${report.group.devices.join(", ")}` +
              (report.group.notes.length ? ` — ${report.group.notes.join("; ")}` : "")
            : "none: no IOMMU translates its DMA"),
    ];
    if (d.bridges.length)
        facts.push(fact("Upstream bridges", d.bridges.join(" → ")));
    if (d.thunderbolt)
        facts.push(fact("Thunderbolt", d.thunderbolt_reason));
    if (d.netdevs.length)
        facts.push(fact("Network interfaces",
                        list(d.netdevs, n => `${n.name} (${n.operstate}${n.master ? `, in ${n.master}` : ""})`)));
    if (d.nvme.length)
        facts.push(fact("NVMe",
                        list(d.nvme, n => `${n.name}: ${n.model}, ${n.namespaces.map(ns => ns.name).join(", ")}`)));
    facts.push(
        fact("In use", list(d.in_use_reasons, r => r.detail, "no")),
        fact("Findings", list(report.findings, f => `${f.severity}: ${f.title}`)),
        fact("Matching rules", report.rules === null
            ? "the policies are not valid (iommuctl check says why)"
            : list(report.rules, r => `${r.name} (${r.file}:${r.line}, ${r.mode})`)),
        fact("Changes by iommud",
             list(report.changes, c => `${c.time}: ${c.object} ${c.key} ${c.from} → ${c.to} (rule ${c.rule})`)));
    return el("dl", { class: "device-facts" }, ...facts);
}

// --- the plan: the daemon's Plan (docs/plan-json.md), Apply and Revert -----------------------

let client = null;

function renderPlan(plan) {
    $("plan-rows").replaceChildren(...plan.changes.map(c =>
        el("tr", { "data-device": c.device },
           el("th", { scope: "row" }, c.device),
           el("td", { "data-field": "change" }, `${c.object} ${c.key}: ${c.from} → ${c.to}`),
           el("td", { "data-field": "mode" }, c.mode),
           el("td", { "data-field": "risk" }, el("span", { class: `risk risk-${c.risk}` }, c.risk)),
           el("td", { "data-field": "trade-off" }, c.trade_off,
              c.disruptive
                  ? el("span", { class: "note" }, " Disruptive: rebinds the driver or resets the link.")
                  : null,
              c.note ? el("span", { class: "note" }, ` ${c.note}`) : null),
           el("td", { "data-field": "rule" }, `${c.rule.name} (${c.rule.file}:${c.rule.line})`))));
    $("plan-table").hidden = plan.changes.length === 0;
    $("no-changes").hidden = plan.changes.length > 0;
    $("skips").replaceChildren(...plan.skips.map(k =>
        el("li", { "data-device": k.device }, `${k.device}: ${k.object} ${k.key} → ${k.wanted}: ${k.message}`)));
    $("skips-title").hidden = plan.skips.length === 0;
    $("plan-message").hidden = true;
}

function readPlan() {
    return client.call(PATH, IFACE, "Plan", [false, ""])
            .then(([json]) => renderPlan(JSON.parse(json)))
            .catch(ex => {
                $("plan-message").textContent = `The daemon's plan could not be read: ${cockpit.message(ex)}`;
                $("plan-message").hidden = false;
            });
}

// Apply and Revert are root's or polkit's (org.iommud1.apply, org.iommud1.revert): the bridge
// calls with superuser "try", so a session with administrative access may, and iommud refuses
// anyone else with AccessDenied, said here in words.
function actionButton(method, address, label) {
    const button = el("button", { type: "button", class: "action", "data-method": method,
                                  "aria-label": `${label} ${address}` }, method);
    button.addEventListener("click", () => act(method, address));
    return button;
}

// Root or Cockpit's administrative access may change things; any other session is read-only and
// says so. Its buttons stay: polkit may still allow that user (rules in /etc/polkit-1/rules.d).
function watchPermission() {
    const permission = cockpit.permission({ admin: true });
    const update = () => {
        $("read-only").hidden = permission.allowed !== false;
        $("read-only").dataset.allowed = String(permission.allowed);
    };
    permission.addEventListener("changed", update);
    update();
}

function outcomes(actions) {
    return actions.length
        ? actions.map(([, result, device, message]) => `${result}${device ? ` ${device}` : ""}: ${message}`).join("; ")
        : "nothing to do";
}

function act(method, address) {
    const line = $("action-message");
    line.className = "";
    line.textContent = `${method} ${address}…`;
    const args = method === "Apply" ? [false, address] : [address];
    client.call(PATH, IFACE, method, args)
            .then(([actions]) => {
                line.textContent = `${method} ${address}: ${outcomes(actions)}`;
                line.dataset.result = "done";
            })
            .catch(ex => {
                const denied = ex.name === "org.freedesktop.DBus.Error.AccessDenied";
                line.className = "error";
                line.dataset.result = denied ? "denied" : "failed";
                line.textContent = denied
                    ? `${method} ${address} was refused: it needs administrative access (Cockpit's ` +
                      `"Administrative access" in the top bar) or polkit's permission. iommud said: ${ex.message}`
                    : `${method} ${address} failed: ${cockpit.message(ex)}`;
            })
            .finally(refresh);
}

// --- history: iommud's journal entries, newest first -------------------------------------------

// The MESSAGE_ID of each kind of entry iommud writes (src/app/change/message_ids.hpp; the catalog,
// catalog/iommud.catalog, explains each): tests/cockpit checks that this holds them all.
const MESSAGE_IDS = {
    "16f439e513b4481aa99d04094596ffda": "started",
    "ec3ed2b1eb094e9da215ec6cd8347600": "weakened",
    "d463f6ed8f5a47d486ad4b0dbd88c24e": "changed",
    "b03a51f8e908478b9c0d9322a29e2c45": "advised",
    "8e66d046aee24c5bb575afe346446f31": "refused",
    "16d1a84d21544e9fac413193e131fe9d": "failed",
    "7bbdac1154a4447f8f3726189cf35385": "recovered",
    "40dd2a3790f1493684b1a4d3b4e3b6ec": "policies loaded",
    "94f8437cb3474d33b97e1e3d733b8c90": "policies rejected",
    "37e097fceacb4da7bba7f9f1abd8307c": "replugged",
    "f9a878de3cec4d2c8e5528b4c780a18f": "reverted",
    "b282470e86824954844d0a37c8464bd2": "measured",
    "219f67a45a864ab8922530d9cf11bbae": "events lost",
    "fee5a7bd6af842c1b7ac52d4805a577b": "stopping",
};
const HISTORY_LINES = 100;
const MEASURED_ID = "b282470e86824954844d0a37c8464bd2";

// A measured entry's before and after (docs/measure.md lists its fields), as the row shows them.
function journalEffect(e) {
    const field = name => e[`IOMMUD_${name}`] ?? "unknown";  // no sample of the device in that window
    const pair = (key, unit) => `${field(`${key}_BEFORE`)} → ${field(`${key}_AFTER`)}${unit}`;
    const maps = e.IOMMUD_MAPS_ATTRIBUTED === "yes" ? `${pair("MAPS_PER_S", " maps/s")}, ` : "";
    return el("p", { class: "measured" },
              `${maps}${pair("BOUNCES_PER_S", " bounces/s")}, translated ${pair("TRANSLATED", "")}`);
}

// Cockpit 287's base1 has no cockpit.journal (Cockpit's own pages bundle theirs), so the page runs
// journalctl as they do: one JSON object a line. Matches on one field are or'ed.
function readHistory() {
    const matches = Object.keys(MESSAGE_IDS).map(id => `MESSAGE_ID=${id}`);
    const command = ["journalctl", "--output=json", "--reverse", `--lines=${HISTORY_LINES}`, "--no-pager", ...matches];
    return cockpit.spawn(command, { superuser: "try", err: "message" })
            .then(out => renderHistory(out.split("\n").filter(line => line.trim()).map(line => JSON.parse(line))))
            .catch(ex => {
                $("history-message").textContent = `iommud's journal could not be read: ${cockpit.message(ex)}`;
                $("history-message").hidden = false;
            });
}

function renderHistory(entries) {
    // Where the keyboard was stays so across a read (an entry is known by its journal cursor).
    const focused = document.activeElement?.closest("#history-entries li")?.dataset.cursor;
    $("history-entries").replaceChildren(...entries.map(e => {
        const time = new Date(Number(e.__REALTIME_TIMESTAMP) / 1000).toISOString().replace(/\.\d+Z$/, "Z");
        const address = e.IOMMUD_DEVICE;
        const attrs = { "data-id": e.MESSAGE_ID, "data-cursor": e.__CURSOR };
        if (address)
            attrs["data-device"] = address;
        return el("li", attrs,
                  el("time", { datetime: time }, time), " ",
                  el("span", { class: "kind" }, MESSAGE_IDS[e.MESSAGE_ID] ?? "iommud"), " ",
                  el("span", { class: "message" }, typeof e.MESSAGE === "string" ? e.MESSAGE : "(not text)"),
                  address ? deviceLink(address) : null,
                  e.MESSAGE_ID === MEASURED_ID ? journalEffect(e) : null);
    }));
    if (focused)
        [...document.querySelectorAll("#history-entries li")].find(li => li.dataset.cursor === focused)
                ?.querySelector("button")?.focus();
    $("no-history").hidden = entries.length > 0;
    $("history-message").hidden = true;
}

// To the device's row in the table: focused, so that Enter opens it.
function deviceLink(address) {
    const button = el("button", { type: "button", class: "link", "aria-label": `Show ${address} in the table` },
                      address);
    button.addEventListener("click", () => {
        const target = document.querySelector(`#device-rows tr[data-address="${address}"] button.disclosure`);
        target?.scrollIntoView({ block: "center" });
        target?.focus();
    });
    return el("span", { class: "device" }, " ", button);
}

// --- the daemon --------------------------------------------------------------------------------

// One read of the host at a time; a change during a read asks for another after it. `generation`
// drops a read the daemon's leaving made stale; the proxy says "changed" when it leaves too.
let running = false;
let reading = false;
let again = false;
let generation = 0;

function refresh() {
    if (!running)
        return;
    if (reading) {
        again = true;
        return;
    }
    reading = true;
    again = false;
    const mine = generation;
    iommuctl("status")
            .then(status => {
                if (mine !== generation)
                    return;
                renderVerdict(status);
                if (!status.iommu.present)
                    return show("no-iommu");
                renderTable(status);
                return Promise.all([readPlan(), readHistory()]).then(() => {
                    if (mine === generation)
                        show("loaded");
                });
            })
            .catch(ex => {
                if (mine === generation)
                    show("failed", `iommuctl status --json: ${cockpit.message(ex)}`);
            })
            .finally(() => {
                reading = false;
                if (again)
                    refresh();
            });
}

function daemonLine(manager) {
    $("daemon-line").textContent = manager.valid
        ? `iommud ${manager.Version}, ${manager.State}: ${manager.Summary}`
        : "";
}

function start() {
    client = cockpit.dbus(NAME, { superuser: "try" });
    const manager = client.proxy(IFACE, PATH);
    client.subscribe({ path: PATH, interface: IFACE, member: "Measured" }, (_path, _iface, _signal, [effects]) =>
        onMeasured(effects));
    manager.addEventListener("changed", () => {
        daemonLine(manager);
        refresh();
    });
    // The bridge says who owns the name at first and at every change: null when iommud is gone.
    client.addEventListener("owner", (_event, owner) => {
        generation++;
        running = owner !== null;
        if (!running) {
            $("daemon-line").textContent = "";
            show("not-running");
            return;
        }
        show("loading");
        manager.wait().then(() => daemonLine(manager));
        refresh();
    });
    client.addEventListener("close", (_event, ex) => {
        generation++;
        running = false;
        show("failed", `The system bus: ${cockpit.message(ex)}`);
    });
}

watchPermission();
start();
