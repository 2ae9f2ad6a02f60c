# Administrators offer curated VMs over a template; tenants make VMs of them
# with `catalog_item` (OSAC's ComputeInstanceCatalogItem).
resource "vmaas_catalog_item" "example" {
  name        = "ci-runner"
  template    = "tiny"
  title       = "CI runner"
  description = "A *tiny* VM for short CI jobs: one or two cores, stopped until asked."
  published   = true

  # Tenants may choose 1 or 2 cores; 1 unless they say.
  field_definition {
    path              = "template_parameters.vm_cpu_cores"
    display_name      = "Cores"
    editable          = true
    default           = 1
    validation_schema = jsonencode({ type = "integer", minimum = 1, maximum = 2 })
  }

  # Every VM of it is made stopped, and cannot be given another run strategy.
  field_definition {
    path     = "run_strategy"
    editable = false
    default  = "Halted"
  }
}
