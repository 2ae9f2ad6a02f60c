resource "vmaas_virtual_network" "example" {
  name      = "example"
  ipv4_cidr = "10.70.0.0/16"
}

resource "vmaas_subnet" "example" {
  name            = "example"
  virtual_network = vmaas_virtual_network.example.id
  ipv4_cidr       = "10.70.1.0/24"
}

resource "vmaas_virtual_machine" "example" {
  name     = "example"
  template = "tiny"
  network_attachment {
    subnet = vmaas_subnet.example.id
  }
}

resource "vmaas_load_balancer" "example" {
  name    = "example"
  subnet  = vmaas_subnet.example.id
  targets = [vmaas_virtual_machine.example.id]
  port_mapping {
    protocol      = "PROTOCOL_TCP"
    external_port = 80
    internal_port = 8080
  }
}

output "address" {
  value = vmaas_load_balancer.example.address
}
