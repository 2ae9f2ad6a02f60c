data "vmaas_security_group" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_security_group.example.id
}
