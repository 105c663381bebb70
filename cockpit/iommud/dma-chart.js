// Live DMA per device (cockpit/README.md "Live DMA"): while the page is open it watches the DMA
// (WatchDma on org.iommud1) and charts, for the busiest devices, the last minutes of the DmaRates
// the daemon sends each second. A module of its own beside iommud.js: it shares nothing with the
// rest of the page but the daemon's name.
//
// #dma's data-dma-state says what it shows (the test waits on it): waiting (for the first
// rates), watching (the charts), not-running, cannot-measure (the daemon's words), failed.

/* global cockpit */

const NAME = "org.iommud1";
const PATH = "/org/iommud1";
const IFACE = "org.iommud1.Manager";
const KEEP = 300; // samples: 5 minutes at one a second
const BUSIEST = 4;
const WIDTH = 300;
const HEIGHT = 60;

// The charts of a device: the field of a DmaRates row, its label and unit.
const SERIES = [
    { key: "maps", row: 2, label: "Maps", unit: "maps/s" },
    { key: "mib", row: 3, label: "Mapped", unit: "MiB/s" },
    { key: "bounces", row: 4, label: "Bounces", unit: "bounces/s" },
    { key: "faults", row: 5, label: "Faults", unit: "faults" },
];

const $ = id => document.getElementById(id);
// An empty chart: the HTML parser puts <svg> and its children in SVG's namespace.
const EMPTY = document.createElement("template");
EMPTY.innerHTML = `<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="none" aria-hidden="true"><polyline/></svg>`;

// The last KEEP DmaRates: {seconds, rows: Map(address → row)}; names by address.
let samples = [];
let attributed = true;
const names = new Map();

function show(state, message = "") {
    $("dma").dataset.dmaState = state;
    $("dma-message").textContent = message;
    $("dma-message").hidden = !message;
    $("dma-charts").hidden = state !== "watching";
}

function number(v) {
    return v.toLocaleString("en-US", { maximumFractionDigits: v < 10 ? 2 : 0 });
}

function values(address, row) {
    return samples.map(s => Number(s.rows.get(address)?.[row] ?? 0));
}

// Busiest first: maps, then bounces, then faults over what is kept.
function busiest() {
    const total = (address, row) => values(address, row).reduce((a, b) => a + b, 0);
    return [...names.keys()]
            .sort((a, b) => total(b, 2) - total(a, 2) || total(b, 4) - total(a, 4) ||
                            total(b, 5) - total(a, 5) || a.localeCompare(b))
            .slice(0, BUSIEST);
}

function line(series) {
    const top = Math.max(1, ...series);
    const step = WIDTH / (KEEP - 1);
    const start = KEEP - series.length;
    return series.map((v, i) => `${((start + i) * step).toFixed(1)},${(HEIGHT - v / top * HEIGHT).toFixed(1)}`)
            .join(" ");
}

function chart(address, label, s) {
    const series = values(address, s.row);
    const latest = series.at(-1) ?? 0;
    const peak = Math.max(0, ...series);
    const text = `${s.label}: ${number(latest)} ${s.unit} now, peak ${number(peak)} over the last ` +
                 `${Math.round(samples.reduce((a, x) => a + x.seconds, 0))} s`;
    const svg = EMPTY.content.firstChild.cloneNode(true); // aria-hidden: the caption says it
    const poly = svg.firstChild;
    poly.setAttribute("points", line(series));
    // The values drawn, unscaled (the device's data-seconds beside): rate × seconds is what was counted.
    poly.dataset.values = series.join(" ");
    const figure = document.createElement("figure");
    figure.className = `dma-chart dma-${s.key}`;
    figure.dataset.series = s.key;
    const caption = document.createElement("figcaption");
    caption.className = "dma-latest";
    // The device in words for a screen reader, which reads the caption alone; the eye has the heading.
    const who = document.createElement("span");
    who.className = "visually-hidden";
    who.textContent = `${label}, `;
    caption.append(who, text);
    figure.append(svg, caption);
    return figure;
}

function render() {
    const seconds = samples.map(s => s.seconds).join(" ");
    const devices = busiest().map(address => {
        const name = names.get(address);
        const label = name && name !== address ? `${name} (${address})` : address;
        const group = document.createElement("div");
        group.className = "dma-device";
        group.dataset.address = address;
        group.dataset.seconds = seconds;
        group.setAttribute("role", "group");
        group.setAttribute("aria-label", `DMA of ${label}`);
        const heading = document.createElement("h3");
        heading.textContent = label;
        group.append(heading, ...SERIES.map(s => chart(address, label, s)));
        return group;
    });
    $("dma-attribution").hidden = attributed;
    $("dma-idle").hidden = devices.length > 0;
    $("dma-devices").replaceChildren(...devices);
}

function received(seconds, mapsAttributed, rows) {
    attributed = mapsAttributed;
    for (const row of rows)
        names.set(row[0], row[1]);
    samples.push({ seconds, rows: new Map(rows.map(r => [r[0], r])) });
    samples = samples.slice(-KEEP);
    render();
    show("watching");
}

function start() {
    const client = cockpit.dbus(NAME, { superuser: "try" });
    let running = false;
    let generation = 0;
    client.subscribe({ path: PATH, interface: IFACE, member: "DmaRates" }, (_path, _iface, _signal, args) => {
        if (running && $("dma").dataset.dmaState !== "cannot-measure")
            received(...args);
    });
    // The page's life is the watch's: watch when iommud owns the name, again when it comes back.
    client.addEventListener("owner", (_event, owner) => {
        const mine = ++generation;
        running = owner !== null;
        samples = [];
        names.clear();
        if (!running) {
            show("not-running", "iommud is not running: no live DMA. The charts start when it is back.");
            return;
        }
        show("waiting", "Waiting for the first rates…");
        client.call(PATH, IFACE, "WatchDma", [])
                .catch(ex => {
                    if (mine !== generation)
                        return;
                    if (ex.name === "org.iommud1.Error.CannotMeasure")
                        show("cannot-measure", ex.message);
                    else
                        show("failed", `WatchDma: ${cockpit.message(ex)}`);
                });
    });
    client.addEventListener("close", (_event, ex) => {
        generation++;
        running = false;
        show("failed", `The system bus: ${cockpit.message(ex)}`);
    });
    // The daemon ends the watch when the bridge leaves the bus; a bridge outlives the page.
    window.addEventListener("pagehide", () => {
        if (running)
            client.call(PATH, IFACE, "UnwatchDma", []);
    });
}

start();
