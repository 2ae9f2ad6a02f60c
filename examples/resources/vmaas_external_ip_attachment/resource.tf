resource "vmaas_virtual_machine" "example" {
  name     = "example"
  template = "tiny"
}

resource "vmaas_external_ip" "example" {
  name = "example"
}

# The external IP reaches the VM; moving it is changing compute_instance.
resource "vmaas_external_ip_attachment" "example" {
  name             = "example"
  external_ip      = vmaas_external_ip.example.id
  compute_instance = vmaas_virtual_machine.example.id
}
