resource "vmaas_virtual_network" "example" {
  name      = "example"
  ipv4_cidr = "10.70.0.0/16"
}
