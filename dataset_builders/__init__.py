"""The dataset builders, where users of ``datasets`` look for them.

The builder code lives in the installed package (:mod:`findbench.builders`), so a wheel
install builds the datasets as well as a checkout does; these files re-export it.
``findbench build`` / ``findbench build-neuron-tests`` run them.
"""
