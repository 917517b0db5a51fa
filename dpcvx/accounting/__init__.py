"""Accounting: a ledger of immutable privacy events and an accountant that reserves budget."""
