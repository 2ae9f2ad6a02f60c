data "vmaas_snapshot" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_snapshot.example.id
}
