removed {
  from = terraform_data.a

  provisioner "local-exec" {
    when    = destroy
    command = "echo gone"
  }
}
