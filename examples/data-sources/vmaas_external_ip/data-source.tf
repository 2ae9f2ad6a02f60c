data "vmaas_external_ip" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_external_ip.example.id
}
