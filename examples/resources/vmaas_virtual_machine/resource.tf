resource "vmaas_virtual_machine" "example" {
  name     = "example"
  template = "tiny"
  template_parameters = {
    vm_memory = "256Mi"
  }
  ssh_keys  = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2Tg3qrk5nhYcxcnhqqTNUsJ1XM0Jcyu4L1uQzd2Bjp example"]
  user_data = <<-EOT
    #cloud-config
    hostname: example
  EOT

  timeouts {
    create = "10m"
  }
}

output "internal_ip" {
  value = vmaas_virtual_machine.example.internal_ip
}
