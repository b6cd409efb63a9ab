"""Runs on the LAPTOP: drives rented hosts (Fabric, docker) and archives run directories (boto3)."""
