/*
 * An SSDT that marks one q35 root port external-facing, as the firmware of a
 * Thunderbolt/USB4 host does for the ports its tunnels come out of
 * (tests/vm/README.md, "Untrusted devices"; docs/kernel.md §5).
 *
 * The port is vmlib's `rp_ext`, which the machine places at 00:10.0: QEMU's
 * DSDT names a slot on the root bus S<devfn in hex>, devfn 0x80 -> S80.  The
 * kernel reads the property on root ports only (pci_acpi_set_external_facing(),
 * device_property_read_u8(dev, "ExternalFacingPort")), from a _DSD package
 * under the UUID of the "DSD for PCIe root ports" convention, which the
 * kernel's ACPI property code accepts next to the generic device-properties
 * UUID.  QEMU's own DSDT has no _DSD on that device, so there is no clash.
 *
 * Compiled with iasl (acpica-tools) by vmlib at test time; QEMU loads it with
 * -acpitable file=....
 */
DefinitionBlock ("", "SSDT", 2, "IOMMUD", "EXTPORT", 1)
{
    External (\_SB.PCI0.S80, DeviceObj)

    Scope (\_SB.PCI0.S80)
    {
        Name (_DSD, Package ()
        {
            ToUUID ("efcc06cc-73ac-4bc3-bff0-76143807c389"),
            Package ()
            {
                Package () { "ExternalFacingPort", 1 },
                Package () { "UID", 0 },
            }
        })
    }
}
