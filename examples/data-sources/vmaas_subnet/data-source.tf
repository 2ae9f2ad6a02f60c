data "vmaas_subnet" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_subnet.example.id
}
