resource "vmaas_virtual_network" "example" {
  name      = "example"
  ipv4_cidr = "10.70.0.0/16"
}

resource "vmaas_external_ip" "example" {
  name = "example"
}

# The network's VMs reach out through the external IP.
resource "vmaas_nat_gateway" "example" {
  name            = "example"
  virtual_network = vmaas_virtual_network.example.id
  external_ip     = vmaas_external_ip.example.id
}
