"""Operator-facing views of the broker (:mod:`brokerd.operator.views`,
:mod:`brokerd.operator.inspect`) and the admin operations both protocols share."""
