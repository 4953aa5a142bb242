"""Security: authorization with Kafka's ACL model (:mod:`brokerd.security.acl`,
:mod:`brokerd.security.acl_store`)."""
