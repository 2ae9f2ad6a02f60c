# Two tiers on one subnet: two web VMs behind a load balancer, and a
# private backend VM that only the web tier may reach (its security group
# lets in TCP 80 from the web VMs' fixed addresses alone).
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   terraform apply && curl http://$(terraform output -raw load_balancer)/
terraform {
  required_providers {
    vmaas = {
      source = "vmaas/vmaas"
    }
  }
}

provider "vmaas" {}

variable "template" {
  type    = string
  default = "tiny"
}

resource "vmaas_virtual_network" "app" {
  name      = "two-tier"
  ipv4_cidr = "10.60.0.0/16"
}

resource "vmaas_subnet" "app" {
  name            = "two-tier-app"
  virtual_network = vmaas_virtual_network.app.id
  ipv4_cidr       = "10.60.1.0/24"
}

resource "vmaas_security_group" "web" {
  name            = "two-tier-web"
  virtual_network = vmaas_virtual_network.app.id
  ingress {
    protocol  = "PROTOCOL_TCP"
    port_from = 80
  }
  ingress {
    protocol = "PROTOCOL_ICMP"
  }
  egress {
    protocol = "PROTOCOL_ALL"
  }
}

resource "vmaas_security_group" "backend" {
  name            = "two-tier-backend"
  virtual_network = vmaas_virtual_network.app.id
  # The web VMs are 10.60.1.10 and 10.60.1.11: nothing else gets in.
  ingress {
    protocol  = "PROTOCOL_TCP"
    port_from = 80
    ipv4_cidr = "10.60.1.10/31"
  }
}

resource "vmaas_virtual_machine" "web" {
  count    = 2
  name     = "two-tier-web-${count.index}"
  template = var.template
  network_attachment {
    subnet          = vmaas_subnet.app.id
    ip_address      = "10.60.1.1${count.index}"
    security_groups = [vmaas_security_group.web.id]
  }
  timeouts {
    create = "5m"
  }
}

resource "vmaas_virtual_machine" "backend" {
  name     = "two-tier-backend"
  template = var.template
  network_attachment {
    subnet          = vmaas_subnet.app.id
    ip_address      = "10.60.1.20"
    security_groups = [vmaas_security_group.backend.id]
  }
  timeouts {
    create = "5m"
  }
}

resource "vmaas_load_balancer" "web" {
  name    = "two-tier-web"
  subnet  = vmaas_subnet.app.id
  targets = vmaas_virtual_machine.web[*].id
  port_mapping {
    protocol      = "PROTOCOL_TCP"
    external_port = 80
    internal_port = 80
  }
}

output "load_balancer" {
  value = vmaas_load_balancer.web.address
}

output "backend_ip" {
  value = vmaas_virtual_machine.backend.internal_ip
}
