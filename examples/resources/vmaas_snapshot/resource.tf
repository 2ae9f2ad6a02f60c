resource "vmaas_virtual_machine" "example" {
  name     = "example"
  template = "tiny"
}

# The VM's disks as they are now; a VM can start from it (clone_of_snapshot).
resource "vmaas_snapshot" "example" {
  name             = "example"
  compute_instance = vmaas_virtual_machine.example.id
}
