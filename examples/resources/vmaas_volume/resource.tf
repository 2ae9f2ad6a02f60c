resource "vmaas_volume" "example" {
  name = "example"
  size = "1Gi"
}
