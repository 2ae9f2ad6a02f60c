# N short-lived VMs for a CI pipeline: apply, run the jobs, destroy.
#   terraform apply -var count_vms=5 && ... && terraform destroy
terraform {
  required_providers {
    vmaas = {
      source = "vmaas/vmaas"
    }
  }
}

provider "vmaas" {}

variable "count_vms" {
  type    = number
  default = 3
}

variable "prefix" {
  type    = string
  default = "ci"
}

data "vmaas_template" "tiny" {
  id = "tiny"
}

resource "vmaas_virtual_machine" "runner" {
  count    = var.count_vms
  name     = "${var.prefix}-${count.index}"
  template = data.vmaas_template.tiny.id
  timeouts {
    create = "10m"
  }
}

output "external_ips" {
  value = vmaas_virtual_machine.runner[*].external_ip
}
