# Imported once from a URL (checked against sha256 when given), then
# usable by every VM and volume of the tenant.
resource "vmaas_image" "example" {
  name            = "example"
  source          = "https://images.example.com/debian-12-genericcloud-amd64.qcow2"
  description     = "Debian 12, imported from the vendor's cloud image."
  guest_os_family = "linux"

  timeouts {
    create = "30m"
  }
}
