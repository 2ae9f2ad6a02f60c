resource "vmaas_external_ip" "example" {
  name = "example"
}

output "address" {
  value = vmaas_external_ip.example.address
}
