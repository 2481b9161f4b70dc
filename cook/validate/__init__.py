"""cook.validate"""
