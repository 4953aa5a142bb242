"""The Schema Registry: formats, compatibility, the registry service and its REST API."""
