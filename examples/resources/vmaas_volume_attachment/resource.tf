resource "vmaas_virtual_machine" "example" {
  name     = "example"
  template = "tiny"
}

resource "vmaas_volume" "example" {
  name = "example"
  size = "256Mi"
}

# The volume as a disk of the VM (its serial is the volume's id).
resource "vmaas_volume_attachment" "example" {
  name             = "example"
  volume           = vmaas_volume.example.id
  compute_instance = vmaas_virtual_machine.example.id
}
