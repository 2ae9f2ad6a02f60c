data "vmaas_virtual_network" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_virtual_network.example.id
}
