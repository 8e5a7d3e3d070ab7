# The variables both AMI recipes declare: packer/ami-gate ("gate-and-tag") and, through a symlink,
# packer/ami-gate-delete ("gate-and-delete"). Packer loads every *.pkr.hcl of the directory it builds;
# what only one recipe has is declared in its own imagelint-ami-gate*.pkr.hcl.

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "source_ami" {
  type        = string
  description = "The AMI to start from."
}

variable "instance_type" {
  type    = string
  default = "t3.small"
}

variable "ssh_username" {
  type    = string
  default = "ec2-user"
}

variable "ami_name_prefix" {
  type    = string
  default = "imagelint-gated"
}

variable "imagelint" {
  type        = string
  default     = "imagelint"
  description = "The imagelint command on the Packer host (e.g. /opt/imagelint/bin/imagelint)."
}

variable "imagelint_version" {
  type        = string
  default     = ""
  description = "Refuse to gate unless the Packer host's imagelint is this version (empty: any). The test instance gets the same version."
}

variable "instance_profile" {
  type        = string
  default     = ""
  description = "Instance profile of the test instance (required by the launch gate): AmazonSSMManagedInstanceCore only (it uploads through a presigned URL)."
}

variable "extra_args" {
  type        = string
  default     = ""
  description = "Further `imagelint ami` options, space-separated (e.g. \"--instance-type t3.large --on-fail deregister\")."
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

variable "soak_duration" {
  type        = string
  default     = "10m"
  description = "How long `imagelint ami` soaks the instance booted from the AMI (e.g. 10m, 30m)."
}

variable "offline_mode" {
  type        = string
  default     = "snapshot"
  description = "The offline gate before the instance is launched: snapshot (read the root snapshot in place through the EBS direct APIs: ebs:ListSnapshotBlocks, ebs:GetSnapshotBlock, ec2:DescribeImages, kms:Decrypt for encrypted snapshots), volume (the Packer host is an EC2 instance that mounts it), or none."
}

variable "report_bucket" {
  type        = string
  description = "S3 bucket where the test instance writes its reports (needed by `imagelint ami`)."
}

variable "aws" {
  type        = string
  default     = "aws"
  description = "The AWS CLI on the Packer host (shares and copies the AMI after the gate; ami-gate-delete also finds the AMI by its build-id tag with it)."
}

variable "share_account_ids" {
  type        = list(string)
  default     = []
  description = "Accounts to give launch permission, after the gate passed (never ami_users in the source: that shares before the gate, and tags are invisible in other accounts)."
}

variable "copy_regions" {
  type        = list(string)
  default     = []
  description = "Regions to copy the AMI to (with its tags), after the gate passed (never ami_regions in the source)."
}

variable "candidate_tags" {
  type        = map(string)
  default     = { "imagelint:candidate" = "true" }
  description = "Tags on the AMI and its snapshots that the gate's IAM policy scopes --tag and --on-fail to (imagelint ami policies --candidate-tag imagelint:candidate=true)."
}
