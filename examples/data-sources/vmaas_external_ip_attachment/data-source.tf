data "vmaas_external_ip_attachment" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_external_ip_attachment.example.id
}
