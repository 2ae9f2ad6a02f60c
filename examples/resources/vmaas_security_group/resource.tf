resource "vmaas_virtual_network" "example" {
  name      = "example"
  ipv4_cidr = "10.70.0.0/16"
}

# HTTPS from anywhere, SSH from one network, any egress.
resource "vmaas_security_group" "example" {
  name            = "example"
  virtual_network = vmaas_virtual_network.example.id
  ingress {
    protocol  = "PROTOCOL_TCP"
    port_from = 443
  }
  ingress {
    protocol  = "PROTOCOL_TCP"
    port_from = 22
    ipv4_cidr = "10.70.0.0/16"
  }
  egress {
    protocol = "PROTOCOL_ALL"
  }
}
