resource "vmaas_virtual_network" "example" {
  name      = "example"
  ipv4_cidr = "10.70.0.0/16"
}

resource "vmaas_subnet" "example" {
  name            = "example"
  virtual_network = vmaas_virtual_network.example.id
  ipv4_cidr       = "10.70.1.0/24"
}
