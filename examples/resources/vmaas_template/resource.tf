# Administrators publish templates; tenants' VMs name them.
resource "vmaas_template" "example" {
  id          = "example"
  title       = "Example"
  description = "A small Linux VM."
  parameter {
    name    = "vm_cpu_cores"
    min     = "1"
    max     = "4"
    default = "1"
  }
  parameter {
    name    = "vm_memory"
    default = "256Mi"
  }
}
