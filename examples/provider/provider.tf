# Every setting can come from the environment instead:
#   export VMAAS_ENDPOINT=https://vmaas.example.com VMAAS_TOKEN=... VMAAS_CA_FILE=ca.pem
provider "vmaas" {
  endpoint = "https://vmaas.example.com"
  token    = var.vmaas_token
  ca_file  = "ca.pem"
}

variable "vmaas_token" {
  type      = string
  sensitive = true
}
