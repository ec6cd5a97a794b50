"""Database layer: declarative base, engine factory and migrations runner."""
