"""Pure rules and static checks: no service needed."""
