# imagelint on a QEMU build: audit the .qcow2 the builder wrote, before anything uploads it.
#
# The qemu builder installs or provisions a VM and leaves its disk as `output/disk.qcow2`. The first
# post-processor of the chain below is a `shell-local` one that runs `imagelint audit` on that file:
# read in place (qcow2 container, partition table, LVM, ext4/XFS root and the fstab mounts), no
# mount, no loop device, no root. A failing or inconclusive audit stops the chain, so the
# post-processors after it (your upload: `amazon-import`, `vagrant`, `artifice` + `shell-local`
# uploads, ...) never run on a bad image. Needs the disk extra on the Packer host:
# `pip install 'imagelint[disk] @ git+https://github.com/imagelint/imagelint'` (or '.[disk]' in a clone).
#
# With `-var soak=10m`, the second post-processor boots that qcow2 in a throwaway QEMU machine on the
# Packer host and audits and soaks it (`imagelint vm check`): the image's own bootloader, kernel and
# units, on an overlay (the image is never written). Its failing or inconclusive verdict stops the
# chain too. It needs qemu-system-x86, qemu-utils, genisoimage and openssh-client on the Packer host
# (ovmf for vm_firmware=uefi); KVM when /dev/kvm opens, else TCG (minutes to boot). Empty: no soak.
#
#   packer init packer/qemu && packer build -var iso_url=... -var iso_checksum=... packer/qemu
#   packer build -var iso_url=... -var iso_checksum=... -var soak=10m packer/qemu

packer {
  required_version = ">= 1.7.0"
  required_plugins {
    qemu = {
      source  = "github.com/hashicorp/qemu"
      version = ">= 1.0.0"
    }
  }
}

variable "iso_url" {
  type        = string
  description = "The installer or cloud image the VM starts from."
}

variable "iso_checksum" {
  type        = string
  description = "Its checksum (e.g. sha256:...)."
}

variable "imagelint" {
  type        = string
  default     = "imagelint"
  description = "The imagelint command on the Packer host (with the disk extra installed)."
}

variable "fail_on" {
  type        = string
  default     = "medium"
  description = "Lowest finding severity that fails the gate: info|low|medium|high|critical."
}

variable "imagelint_config" {
  type        = string
  default     = ""
  description = "Path of an .imagelint.yaml on the Packer host (empty: built-in defaults)."
}

variable "report_path" {
  type        = string
  default     = "imagelint-report.json"
  description = "Where the JSON report is written on the Packer host."
}

variable "soak" {
  type        = string
  default     = ""
  description = "After the offline audit, boot the image and soak it this long (10m, 90s; 0: boot and audit only) with imagelint vm check. Empty: no boot."
}

variable "vm_firmware" {
  type        = string
  default     = "bios"
  description = "The firmware the soak boots the image with: bios (SeaBIOS) or uefi (OVMF, for an image built with efi_boot)."
}

variable "soak_report_path" {
  type        = string
  default     = "imagelint-vm-report.json"
  description = "Where the soak's JSON report is written on the Packer host."
}

locals {
  output_directory = "output"
  image            = "output/disk.qcow2"
}

source "qemu" "image" {
  iso_url          = var.iso_url
  iso_checksum     = var.iso_checksum
  output_directory = local.output_directory
  vm_name          = "disk.qcow2"
  format           = "qcow2"
  disk_size        = "8G"
  headless         = true
  communicator     = "ssh"
  ssh_username     = "packer"
  ssh_password     = "packer"
  ssh_timeout      = "30m"
  shutdown_command = "sudo shutdown -P now"
}

build {
  sources = ["source.qemu.image"]

  # Your provisioners go here (they run in the VM over SSH).

  post-processors {
    # First: the gate, on the Packer host, against the qcow2 the builder wrote (read, never written).
    # Variables reach imagelint as options' own arguments (--config=VALUE), the image after `--`.
    post-processor "shell-local" {
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_IMAGE=${local.image}",
        "IMAGELINT_FAIL_ON=${var.fail_on}",
        "IMAGELINT_CONFIG=${var.imagelint_config}",
        "IMAGELINT_REPORT=${var.report_path}",
      ]
      inline = [
        "set -eu",
        "set -- audit \"--fail-on=$IMAGELINT_FAIL_ON\" -f text -f \"json:$IMAGELINT_REPORT\"",
        "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" \"--config=$IMAGELINT_CONFIG\"; fi",
        "set -- \"$@\" -- \"$IMAGELINT_IMAGE\"",
        "echo \"imagelint gate: $IMAGELINT $*\"",
        "\"$IMAGELINT\" \"$@\"",
      ]
    }

    # Second: with -var soak=DURATION, the same qcow2 booted in a throwaway QEMU machine, audited
    # running and soaked (`imagelint vm check`); empty soak: this step does nothing.
    post-processor "shell-local" {
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_IMAGE=${local.image}",
        "IMAGELINT_SOAK=${var.soak}",
        "IMAGELINT_FIRMWARE=${var.vm_firmware}",
        "IMAGELINT_FAIL_ON=${var.fail_on}",
        "IMAGELINT_CONFIG=${var.imagelint_config}",
        "IMAGELINT_REPORT=${var.soak_report_path}",
      ]
      inline = [
        "set -eu",
        "if [ -z \"$IMAGELINT_SOAK\" ]; then echo 'imagelint soak: skipped (soak is empty)'; exit 0; fi",
        "set -- vm check \"--soak=$IMAGELINT_SOAK\" \"--firmware=$IMAGELINT_FIRMWARE\" \"--fail-on=$IMAGELINT_FAIL_ON\"",
        "set -- \"$@\" -f text -f \"json:$IMAGELINT_REPORT\"",
        "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" \"--config=$IMAGELINT_CONFIG\"; fi",
        "set -- \"$@\" -- \"$IMAGELINT_IMAGE\"",
        "echo \"imagelint soak: $IMAGELINT $*\"",
        "\"$IMAGELINT\" \"$@\"",
      ]
    }

    # Then your upload, e.g.:
    # post-processor "shell-local" {
    #   inline = ["aws s3 cp output/disk.qcow2 s3://my-images/"]
    # }
  }
}
