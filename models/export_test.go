package models

// Numbered exposes numbered to the tests.
var Numbered = numbered
