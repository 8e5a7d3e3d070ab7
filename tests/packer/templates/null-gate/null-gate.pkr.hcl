# Packer 1.6.6-compatible: a null builder whose post-processor is the imagelint gate on an image tree.
variable "image_root" {
  type = string
}

variable "fail_on" {
  type    = string
  default = "medium"
}

variable "imagelint_config" {
  type    = string
  default = ""
}

variable "report_path" {
  type    = string
  default = "imagelint-report.json"
}

source "null" "image" {
  communicator = "none"
}

build {
  sources = ["source.null.image"]

  post-processor "shell-local" {
    environment_vars = [
      "IMAGELINT_ROOT=${var.image_root}",
      "IMAGELINT_FAIL_ON=${var.fail_on}",
      "IMAGELINT_CONFIG=${var.imagelint_config}",
      "IMAGELINT_REPORT=${var.report_path}",
    ]
    inline = [
      "set -eu",
      "set -- audit \"--fail-on=$IMAGELINT_FAIL_ON\" -f text -f \"json:$IMAGELINT_REPORT\"",
      "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" \"--config=$IMAGELINT_CONFIG\"; fi",
      "set -- \"$@\" -- \"$IMAGELINT_ROOT\"",
      "echo \"imagelint gate: $(command -v imagelint) $*\"",
      "exec imagelint \"$@\"",
    ]
  }
}
