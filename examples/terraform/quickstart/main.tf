# One VM from a template; prints its external IP.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   terraform apply
terraform {
  required_providers {
    vmaas = {
      source = "vmaas/vmaas"
    }
  }
}

provider "vmaas" {}

variable "name" {
  type    = string
  default = "quickstart"
}

variable "template" {
  type    = string
  default = "tiny"
}

variable "memory" {
  type    = string
  default = "256Mi"
}

variable "state" {
  type    = string
  default = "started"
}

resource "vmaas_virtual_machine" "vm" {
  name     = var.name
  template = var.template
  state    = var.state
  template_parameters = {
    vm_memory = var.memory
  }
  timeouts {
    create = "5m"
  }
}

output "id" {
  value = vmaas_virtual_machine.vm.id
}

output "external_ip" {
  value = vmaas_virtual_machine.vm.external_ip
}

output "status" {
  value = vmaas_virtual_machine.vm.status
}
