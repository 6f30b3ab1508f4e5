"""Platform adapters driven through the real platform libraries against local emulators."""
