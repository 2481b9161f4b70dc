"""cook.train"""
