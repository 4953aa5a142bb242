"""Operator-facing views of the broker (:mod:`brokerd.admin.views`,
:mod:`brokerd.admin.inspect`) and the admin operations both protocols share."""
