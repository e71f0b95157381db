"""The gateway's root: where a newcomer's browser (or curl) lands first."""
