data "vmaas_load_balancer" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_load_balancer.example.id
}
