"""The IR: types (ir.types), graphs, functions and modules (ir.core), the op set (ir.ops)."""
