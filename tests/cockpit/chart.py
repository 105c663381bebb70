"""The Cockpit page's live DMA charts (cockpit/iommud/dma-chart.js) in a real browser, against the
real iommud: page.py's bus, cockpit-ws and Chromium (its CockpitCase), and the tracefs `hist` files
of the daemon's instance written by the test as test_dbus_umockdev.py writes them.

Checked: while the page is open the daemon measures for it (WatchDma), and a device's charts hold
what the test made the kernel count (maps, MiB mapped, bounces, faults), rising when it counts
more, with the latest values as text; closing the page's tab ends the watch (the daemon removes
its tracing instance, which the testbed's rmdir takes as the kernel does); without tracefs the charts give the daemon's CannotMeasure in its words. A screenshot
of each state in $COCKPIT_ARTIFACTS.

Run by ctest (cockpit.chart); by hand as page.py, with tests/cockpit/chart.py."""

import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page import CockpitCase  # noqa: E402
from test_dbus_umockdev import MIB, TraceInstance  # noqa: E402
from testbed import NVME_A, wait_until  # noqa: E402

# What the charts drew of one device: per series the sum over the samples of the values drawn,
# each rate times its sample's seconds (faults are counted per interval already).
COUNTED = """((address) => {
    const device = document.querySelector(`#dma-devices [data-address="${address}"]`);
    if (!device)
        return null;
    const seconds = device.dataset.seconds.split(" ").map(Number);
    const drawn = key => device.querySelector(`[data-series=${key}] polyline`).dataset.values.split(" ").map(Number);
    const sum = (key, rate) => drawn(key).reduce((a, v, i) => a + v * (rate ? seconds[i] : 1), 0);
    return {maps: sum("maps", true), mib: sum("mib", true), bounces: sum("bounces", true),
            faults: sum("faults", false), heading: device.querySelector("h3").textContent,
            latest: [...device.querySelectorAll(".dma-latest")].map(c => c.textContent)};
})"""


class DmaCharts(CockpitCase):
    def wait_dma_state(self, wanted: str) -> None:
        self.wait_for(f"the charts {wanted}", f'document.getElementById("dma").dataset.dmaState === "{wanted}"')

    def counted(self, address: str, maps: int, mapped: int, bounces: int, faults: int) -> dict:
        """Until the device's charts hold these totals since the watch began."""
        def holds():
            c = self.tools.evaluate(f"{COUNTED}({address!r})")
            return c if c and (abs(c["maps"] - maps) < 1e-6 * max(maps, 1) and abs(c["mib"] * MIB - mapped) < 1
                               and abs(c["bounces"] - bounces) < 1e-6 * max(bounces, 1)
                               and c["faults"] == faults) else None
        what = f"{maps} maps, {mapped} bytes, {bounces} bounces and {faults} faults of {address}"
        try:
            return wait_until(what, holds, timeout=15, interval=0.05)
        except AssertionError as e:
            raise AssertionError(f"{e}; the charts drew {self.tools.evaluate(f'{COUNTED}({address!r})')}") from None

    def test_the_charts_show_what_the_kernel_counted_until_their_tab_is_closed(self):
        self.make_host()
        d = self.start_daemon()
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        trace = TraceInstance(self.host, d.proc.pid)
        nvme = NVME_A.address
        trace.counts(nvme, maps=1000, mapped=1000 * 4096, bounces=0, faults=0)  # before the watch: in no rate
        tab = self.in_a_tab_of_its_own()
        self.open_page()
        self.wait_dma_state("watching")

        trace.counts(nvme, maps=4000, mapped=4000 * 4096, bounces=5, faults=2)
        shown = self.counted(nvme, 3000, 3000 * 4096, 5, 2)
        name = next(dev[1] for dev in self.bus.prop("Devices") if dev[0] == nvme) or nvme
        self.assertIn(nvme, shown["heading"])
        self.assertIn(name, shown["heading"])
        for caption, unit in zip(shown["latest"], ("maps/s", "MiB/s", "bounces/s", "faults")):
            self.assertIn(shown["heading"], caption)
            self.assertRegex(caption, rf"[\d.,]+ {unit} now, peak [\d.,]+ over the last \d+ s$")
        self.screenshot("dma-charts")

        # More maps: the line rises by them.
        trace.counts(nvme, maps=11000, mapped=4000 * 4096 + 7000 * 65536, bounces=5, faults=2)
        self.counted(nvme, 10000, 3000 * 4096 + 7000 * 65536, 5, 2)
        self.assertEqual(self.tools.evaluate('document.querySelector("#dma-devices h3").textContent'),
                         shown["heading"], "the busiest device first")
        self.screenshot("dma-charts-risen")

        # Closing the tab ends its watch: the last watcher gone, the daemon removes its tracing
        # instance (the testbed's rmdir takes it as the kernel's does). (cockpit-ws --local-session's
        # bridge leaves the bus with the page, which ends it too: that UnwatchDma is called is not
        # told apart here.)
        self.assertTrue(os.path.isdir(trace.dir))
        self.chromium.browser.call("Target.closeTarget", targetId=tab)
        wait_until("the daemon's tracing instance removed", lambda: not os.path.exists(trace.dir))
        self.assertTrue(d.alive())

    def test_without_tracefs_the_charts_say_why_in_the_daemons_words(self):
        self.make_host()
        d = self.start_daemon()
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        self.open_page()
        self.wait_dma_state("cannot-measure")
        message = self.text("dma-message")
        self.assertIn("tracefs is not mounted (mount it with: mount -t tracefs tracefs /sys/kernel/tracing)", message)
        self.assertEqual(self.tools.evaluate('document.getElementById("dma-charts").hidden'), True)
        self.screenshot("dma-cannot-measure")

        # The daemon gone, the charts say so; back, the page watches again (and is told again why not).
        self.stop(d)
        d.kill()
        self.wait_dma_state("not-running")
        self.assertIn("iommud is not running", self.text("dma-message"))
        self.screenshot("dma-not-running")
        self.start_daemon(state_of=d)
        self.wait_dma_state("cannot-measure")


if __name__ == "__main__":
    unittest.main()
