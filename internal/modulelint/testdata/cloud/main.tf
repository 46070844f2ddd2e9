terraform {
  cloud {
    organization = "example"
  }
}
