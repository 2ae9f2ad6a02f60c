data "vmaas_nat_gateway" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_nat_gateway.example.id
}
