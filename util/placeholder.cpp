// Placeholder so the module library has a source until its code lands; delete when adding the first real file.
