"""The ground floor: bounded reads, atomic pair writes, file kinds, values as read, errors, the schema."""
